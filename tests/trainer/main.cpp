#define BOOST_TEST_MODULE trainer
#include <boost/test/unit_test.hpp>
