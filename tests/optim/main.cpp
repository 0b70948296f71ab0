#define BOOST_TEST_MODULE optim
#include <boost/test/unit_test.hpp>
