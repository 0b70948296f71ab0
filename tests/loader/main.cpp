#define BOOST_TEST_MODULE loader
#include <boost/test/unit_test.hpp>
